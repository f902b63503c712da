"""tilemma.dialects"""
