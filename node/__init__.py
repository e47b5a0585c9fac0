"""seglog.node"""
