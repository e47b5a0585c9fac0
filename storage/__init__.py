"""seglog.storage"""
