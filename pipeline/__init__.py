"""seglog.pipeline: Spark data sources for seglog topics.

`register(spark)` makes two formats available to a SparkSession:

- `seglog`: a topic read and written like Spark's Kafka source (source.py);
- `seglog-files`: partition directories read offline (files_source.py).
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the `seglog` and `seglog-files` formats with `spark`."""
    # Imported here so that `import seglog.pipeline` does not need PySpark.
    from .files_source import SeglogFilesDataSource
    from .source import SeglogDataSource

    spark.dataSource.register(SeglogDataSource)
    spark.dataSource.register(SeglogFilesDataSource)
