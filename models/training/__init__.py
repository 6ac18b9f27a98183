"""Training the encoders: the shared loop, seeded, checkpointed and resumable (`loop`), the
documents and positive pairs the trainers read and the held-out split (`data`), the losses as
pure tensor functions (`losses`), and early stopping on held-out in-corpus pairs
(`early_stopping`, `held_out`). Loading or serving an encoder imports none of it."""
