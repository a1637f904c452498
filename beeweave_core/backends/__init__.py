"""beeweave_core/backends"""
