"""spark-submit entry points. Each module parses arguments and calls a function that tests call directly."""
