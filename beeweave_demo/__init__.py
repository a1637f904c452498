"""beeweave_demo"""
