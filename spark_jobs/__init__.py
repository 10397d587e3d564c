"""spark-submit entry points of xembed; the logic lives in spark_jobs.lib."""
