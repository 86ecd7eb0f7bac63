"""The durable log of every real execution (SQLite, WAL) and its exports.

Example:
    >>> from wmrl_env.store import ExecutionLog, LoggingExecutor, export_log
"""

from wmrl_env.store.export import export_csv, export_log, export_parquet
from wmrl_env.store.logging_executor import LoggingExecutor
from wmrl_env.store.sqlite_log import ExecutionLog, ExecutionRecord

__all__ = [
    "ExecutionLog",
    "ExecutionRecord",
    "LoggingExecutor",
    "export_csv",
    "export_log",
    "export_parquet",
]
