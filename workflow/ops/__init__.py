"""Ops: running a project — init, doctor, the demo, and the corpus generator for benchmarks."""
