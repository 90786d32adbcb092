"""Stage 1: Sentinel-2 L2A scenes found by STAC search, read (locally, over HTTP or S3), cloud-masked and
composited onto a regular time grid per MGRS tile and year."""
