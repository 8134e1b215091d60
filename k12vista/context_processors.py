from k12vista.roles import Role, has_role


def roles(request):
    """Which navigation entries to show. Showing is not access: every view
    checks its role on the server again."""
    user = request.user
    return {"user_roles": {role.value: has_role(user, role) for role in Role}}
