"""lcflow: land-cover maps from Sentinel-2 time series."""

__version__ = "0.1.0"
