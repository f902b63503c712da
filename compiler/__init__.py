"""tilemma.compiler"""
