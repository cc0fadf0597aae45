"""Tool (bench): benchmarks outside the pipeline.

``packs`` = packed vs one-at-a-time run-steps/s of the engine's
training step; ``scans`` = the fast scans against their sequential references."""
