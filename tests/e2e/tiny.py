"""The tiny-run preset of the e2e tests: written once in the package (hacrl_exp.config.presets), where the
benchmarks read it too."""

from hacrl_exp.config.presets import tiny_overrides

__all__ = ["tiny_overrides"]
