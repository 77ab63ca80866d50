// Data-plane roles for the person (or pipeline) who deploys, on the account that holds the jobs:
// with shared keys off, nobody can otherwise upload a job's items (`coordinator submit` above
// 48 KiB), put a message on the jobs queue, read a result or the poison queue, or browse the
// account in Storage Explorer without granting themselves a role by hand. Data only: no
// management-plane role, so no keys to list and no account settings to change.

@description('Storage account (in this resource group) that holds the coordinator\'s blobs and queues.')
param storageAccountName string

@description('Object id of the deployer (azd fills it from the signed-in account: AZURE_PRINCIPAL_ID).')
param principalId string

@description('User for a person, ServicePrincipal for a pipeline\'s identity.')
@allowed(['User', 'ServicePrincipal', 'Group'])
param principalType string = 'User'

// Built-in role definition ids, from https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/storage
var storageRoles = {
  // Upload job inputs, read results and the lease, browse containers.
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
  // Submit jobs by queue message, read and clear the jobs-poison queue.
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
}

resource storageAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource assignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for roleId in [storageRoles.storageBlobDataContributor, storageRoles.storageQueueDataContributor]: {
    name: guid(storageAccount.id, principalId, roleId)
    scope: storageAccount
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
      principalId: principalId
      principalType: principalType
    }
  }
]
