"""The base of every encoder's architecture config: a frozen dataclass that goes to and comes
from JSON (`config.json` beside the weights), refusing keys it does not know."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Self


@dataclass(frozen=True)
class ModelConfig:
    """Architecture hyperparameters; subclasses are frozen dataclasses with defaults.

    Runtime knobs (device, precision, batch sizes) never belong here: they come from the
    caller's settings.
    """

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Self:
        """The config saved as `values` (defaults for the keys it lacks).

        Raises:
            ValueError: `values` holds a key that is not a field of this config.
        """
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(
                f"Unknown {cls.__name__} keys {unknown}. Valid keys are: {sorted(names)}."
            )
        return cls(**values)
