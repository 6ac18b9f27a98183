"""Building an index version: split, encode (locally or on Ray), write vectors and publish."""
