// Data-plane roles for the app's managed identity on one storage account, and nothing more:
// no management-plane role, so the identity cannot list keys or change the account.
// Used for the account that holds the host's state and for a shared coordinator account when
// several apps elect one leader (see main.bicep: coordinatorStorageAccountName).

@description('Storage account (in this resource group) the identity may use.')
param storageAccountName string

@description('Principal (object) id of the user-assigned managed identity.')
param principalId string

// Built-in role definition ids, from https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/storage
// (test/unit/infra checks every role id in infra/ against that page's names).
var storageRoles = {
  // Blob leases (leader election), chunk results, the Functions host's own containers and the
  // Flex Consumption deployment package. Owner rather than Contributor: the host documents Owner.
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  // The jobs and work-items queues, their poison queues and Durable's control/work-item queues.
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
  // Durable Functions' Azure Storage backend keeps instances and history in tables.
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
}

resource storageAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource assignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for role in items(storageRoles): {
    name: guid(storageAccount.id, principalId, role.value)
    scope: storageAccount
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', role.value)
      principalId: principalId
      principalType: 'ServicePrincipal'
    }
  }
]
