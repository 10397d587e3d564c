"""Delta table contracts and input-format schemas of xembed, as code."""

from schemas import defaults
from schemas._spec import Column, TableSpec, parse_type
from schemas.defaults import VIEWS
from schemas.tables import TABLES, table

__all__ = ["TABLES", "VIEWS", "Column", "TableSpec", "defaults", "parse_type", "table"]
