"""seglog.pipeline"""
