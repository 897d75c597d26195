"""lagscope.collector"""
