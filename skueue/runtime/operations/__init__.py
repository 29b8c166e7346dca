"""Operations: metrics, health probes, stats, the daemon's own usage and its logs."""
