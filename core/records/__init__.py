"""RecordBatch v2: header parsing, CRC-32C validation, compression codecs, offset assignment."""
