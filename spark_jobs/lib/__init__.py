"""Library behind the spark_jobs entry points: DataFrame -> DataFrame steps and lake I/O."""
