"""tilemma.passes"""
