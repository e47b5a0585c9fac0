"""seglog.client"""
