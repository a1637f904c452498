"""beeweave_core/backends/neo4j"""
