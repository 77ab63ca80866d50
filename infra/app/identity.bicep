// The user-assigned managed identity: the app's only credential. Its data roles are granted by
// storageAccess.bicep and monitoringAccess.bicep; the Function App and its deployment package use it.
// Plain resource, no registry module: what avm/res/managed-identity/user-assigned-identity 0.4.1
// deployed with the parameters main.bicep gave it (no federated credentials, roles or lock).

@description('Identity name.')
param name string

@description('Region of the identity.')
param location string

@description('Tags of the identity.')
param tags object = {}

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2024-11-30' = {
  name: name
  location: location
  tags: tags
}

@description('Resource id, as the Function App\'s identity list and the deployment storage\'s authentication name it.')
output resourceId string = identity.id

@description('Object id of its service principal: what role assignments grant.')
output principalId string = identity.properties.principalId

@description('Client id: what the app settings select the identity with (__clientId, ClientId=).')
output clientId string = identity.properties.clientId
