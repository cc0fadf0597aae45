"""Package (ssmrepro): reproduce Mamba / SSM paper figures from real training runs."""

__version__ = "0.1.0"
