"""`docsim evaluate`: running judged queries through the search path, metrics and paired tests."""
