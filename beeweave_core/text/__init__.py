"""beeweave_core/text"""
