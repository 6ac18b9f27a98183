"""Exact scoring spread over shards: a shard's side (`shard`), the coordinator's (`coordinator`),
and shards as Ray actors (`actors`); `models.kernels.shard_moments` holds the maths."""
