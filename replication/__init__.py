"""seglog.replication"""
