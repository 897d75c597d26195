"""lagscope.analytics"""
