// Data-plane roles for the app's managed identity on one storage account, and nothing more:
// no management-plane role, so the identity cannot list keys or change the account.
// Used for the account that holds the host's state and for a shared coordinator account when
// several apps elect one leader (see main.bicep: coordinatorStorageAccountName); each gets only
// the roles of what it holds.

@description('Storage account (in this resource group) the identity may use.')
param storageAccountName string

@description('Principal (object) id of the user-assigned managed identity.')
param principalId string

@description('true: the account behind AzureWebJobsStorage (the host and Durable use blobs, queues and tables). false: an account that holds only the coordinator\'s lease, queues, results and job index (blobs, queues and one table).')
param hostStorage bool

// Built-in role definition ids, from https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/storage
// (test/unit/infra checks every role id in infra/ against that page's names).
var storageRoles = {
  // Host storage: the Functions host's own containers, the Flex Consumption deployment package,
  // and by default the leader lease and chunk results. Owner rather than Contributor: the host
  // documents Owner for AzureWebJobsStorage.
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  // A coordinator-only account: the lease blob and chunk results are read and written, never owned.
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
  // The jobs and work-items queues, their poison queues and Durable's control/work-item queues.
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
  // Durable Functions' Azure Storage backend keeps instances and history in tables; the app keeps its job index in one.
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
}

var roleIds = hostStorage
  ? [storageRoles.storageBlobDataOwner, storageRoles.storageQueueDataContributor, storageRoles.storageTableDataContributor]
  : [storageRoles.storageBlobDataContributor, storageRoles.storageQueueDataContributor, storageRoles.storageTableDataContributor]

resource storageAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource assignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for roleId in roleIds: {
    name: guid(storageAccount.id, principalId, roleId)
    scope: storageAccount
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
      principalId: principalId
      principalType: 'ServicePrincipal'
    }
  }
]
