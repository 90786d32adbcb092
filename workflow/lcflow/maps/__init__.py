"""Stage 5: maps of whole tiles, made consistent across years, change maps, quicklooks and STAC items."""
