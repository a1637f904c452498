"""beeweave_core/backends/sqlite"""
