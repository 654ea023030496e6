"""One module per data format: validate → ingest → read."""
