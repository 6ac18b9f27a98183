"""The `docsim` command line, one module per command group."""
