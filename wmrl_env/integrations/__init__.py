"""Adapters to other RL libraries; each imports its library only when used (an extra)."""
