"""A served version in memory: its vectors laid out by document (`loaded_index`, from SQL's
`structure`), the compressed sentence level (`sentence_scan`) and the memory-mapped rows a
sharded coordinator holds (`mapped_rows`)."""
