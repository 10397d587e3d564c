"""Delta table contracts and input-format schemas of xembed, as code."""

from schemas._spec import Column, TableSpec, parse_type
from schemas.tables import TABLES, VIEWS, table

__all__ = ["TABLES", "VIEWS", "Column", "TableSpec", "parse_type", "table"]
