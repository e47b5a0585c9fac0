"""seglog.chaos"""
