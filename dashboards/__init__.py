"""lagscope.dashboards"""
