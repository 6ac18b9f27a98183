"""Readers for the formats people keep long documents in: each turns a file into a
`SourceDocument` with the structure the file itself gives (headings as sections, the author's
paragraphs), or a `Skipped` saying why it cannot be read. `sniff` tells the format by content."""
