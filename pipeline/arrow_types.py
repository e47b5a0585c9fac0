"""Arrow types shared by the decoder and the schema, in a module of their own so that
the driver's planning process can build the schema without importing the decoder
(numpy, pyarrow.compute, the storage codecs): Spark starts a Python process per
query plan, and every import there is paid per query."""

from __future__ import annotations

import pyarrow as pa

HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_ARROW_TYPE = pa.list_(pa.field("element", HEADER_STRUCT))
