"""lagscope.deploy"""
