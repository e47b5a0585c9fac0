"""Runnable examples of the seglog Spark data source."""
