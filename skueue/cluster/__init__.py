"""Running clusters: in-process, as launched daemons, and a load generator over them."""
