"""Library (kernels): sequential reference scans, fast scans, SSD, the CUDA adapters and the
backend dispatch the models call."""
