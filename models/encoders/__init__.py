"""The encoders: the `Encoder` protocol and its input and output records (`encoder`), the
Hugging Face transformer with mean pooling (`transformer`) and what it pools with (`pooling`,
`late`, `levels`, `document_encoding`), the trained architectures and their recipes (`sdr`,
`bregman`, `adapt`, `graph`, `colde`, which train with `training`'s losses and data), and what
builds them from a model directory: where encoders live (`registry`), the backbone
(`backbone`), the saved configs and directories (`model_config`, `model_directory`,
`composite`) and the one loader (`loading`)."""
